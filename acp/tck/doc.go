// Package tck replays the requirements of the ACP conformance kit, acp-tck
// (github.com/agentclientprotocol/acp-tck, v1 suite), against the built
// acpd with the scripted model, and a few of acpd's own wire promises
// beside them. The kit itself is a Python program installed with uv, which
// neither CI's registries (Go, npm, Debian) nor the Go proxy carry, so its
// requirements are written here as Go tests: each is driven the way the kit
// drives an agent — a fresh acpd per check, over its stdin and stdout, a
// mock client answering permission requests and refusing the client methods
// it did not advertise — and the run ends with the kit's verdict: no
// MANDATORY failure or untested requirement, no failure of an advertised
// CAPABILITY. acpd also holds itself to the ADVISORY ones.
//
// The requirement ids and tiers are the kit's; the wording is ours.
package tck
