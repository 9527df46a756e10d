// Package loopdetect ports qwen-code's tool-call loop protection: the
// (tool, args) repeat key, the adaptive per-turn cap predicate and tracker,
// the core loop-detection service (always-on and heuristic tiers) and the
// daemon's repeated-tool-failure reducer.
//
// Everything here is pure and synchronous: no I/O, no goroutines and no
// mutable package state, so the core service and the ACP session host make
// identical decisions from the same inputs. A Detector or CapTracker is not
// safe for concurrent use; each turn owns its own.
package loopdetect
