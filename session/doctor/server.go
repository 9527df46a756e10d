package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/acpd/acpd/session/server"
)

// certWarnBefore is how long before its expiry a certificate is reported:
// long enough to renew it by hand.
const certWarnBefore = 14 * 24 * time.Hour

// checkServer checks what `acpd serve` would refuse at start, and what it
// would only warn about: the address rule, the certificate (readable, the
// key its own, valid now) and the token (present, long enough, its file
// not readable by others). Without [server] listen it does not apply.
func checkServer(_ context.Context, env *Env) Result {
	if env.ConfigErr != nil {
		return skipNoConfig()
	}
	cfg := env.Config
	sc := cfg.Server
	if sc.Listen == "" {
		return Result{Status: Skip, Detail: "acpd serve is not set up ([server] listen unset)"}
	}
	if err := server.CheckAddress(sc.Listen, sc.TLSCert != ""); err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	var parts []string
	status := OK
	if sc.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(sc.TLSCert, sc.TLSKey)
		if err != nil {
			return Result{Status: Fail, Detail: fmt.Sprintf("TLS certificate %s / key %s: %v", sc.TLSCert, sc.TLSKey, err)}
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return Result{Status: Fail, Detail: fmt.Sprintf("TLS certificate %s: %v", sc.TLSCert, err)}
		}
		now := time.Now()
		switch {
		case now.After(leaf.NotAfter):
			return Result{Status: Fail, Detail: fmt.Sprintf("TLS certificate %s expired on %s", sc.TLSCert, leaf.NotAfter.UTC().Format(time.DateOnly))}
		case now.Before(leaf.NotBefore):
			return Result{Status: Fail, Detail: fmt.Sprintf("TLS certificate %s is not valid before %s", sc.TLSCert, leaf.NotBefore.UTC().Format(time.DateTime))}
		case leaf.NotAfter.Sub(now) < certWarnBefore:
			status = Warn
			parts = append(parts, fmt.Sprintf("certificate expires soon (%s)", leaf.NotAfter.UTC().Format(time.DateOnly)))
		default:
			parts = append(parts, fmt.Sprintf("certificate valid until %s", leaf.NotAfter.UTC().Format(time.DateOnly)))
		}
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := server.LoadToken(cfg, getenv); err != nil {
		return Result{Status: Fail, Detail: err.Error()}
	}
	if name, file := server.TokenSource(cfg); name != "" {
		parts = append(parts, "token from $"+name)
	} else {
		fi, err := os.Stat(file)
		if err != nil {
			return Result{Status: Fail, Detail: err.Error()}
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			return Result{Status: Fail, Detail: fmt.Sprintf("token file %s has mode %s: other users can read it; chmod 600 it", file, m)}
		}
		parts = append(parts, "token file "+file+" (owner only)")
	}
	tlsNote := "loopback, no TLS"
	if sc.TLSCert != "" {
		tlsNote = "TLS"
	}
	return Result{Status: status, Detail: fmt.Sprintf("%s (%s); %s", sc.Listen, tlsNote, strings.Join(parts, "; "))}
}
