package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/oauth2"
)

// maxStoreFile bounds one issuer's file.
const maxStoreFile = 1 << 20

// Grant is what acpd keeps of one sign-in: the MCP server it is for (the
// resource the token is bound to), the authorization server that issued
// it, the client acpd registered there and the token with its refresh
// token.
type Grant struct {
	Resource     string        `json:"resource"`
	Issuer       string        `json:"issuer"`
	ClientID     string        `json:"clientId"`
	ClientSecret string        `json:"clientSecret,omitempty"`
	TokenURL     string        `json:"tokenUrl"`
	AuthStyle    int           `json:"authStyle,omitempty"`
	Token        *oauth2.Token `json:"token"`
}

func (g *Grant) config() *oauth2.Config {
	return &oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: oauth2.AuthStyle(g.AuthStyle)}}
}

// issuerFile is one authorization server's file: its grants by resource.
type issuerFile struct {
	Issuer string   `json:"issuer"`
	Grants []*Grant `json:"grants"`
}

// Store keeps grants in a folder of acpd's state (session.dataDir), one
// file per issuer, each readable and writable by the user alone (0600 in
// a 0700 folder): credentials are keyed by issuer, as MCP's 2026-07-28
// revision asks, so a token goes only to servers of the authorization
// server that issued it. Files are replaced atomically; the grants of
// several acpd processes may interleave, the last write of one issuer's
// file winning.
type Store struct {
	dir string
	mu  sync.Mutex
}

// NewStore keeps grants in dir (made on the first write).
func NewStore(dir string) *Store { return &Store{dir: dir} }

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// CanonicalResource is u as MCP's canonical server URI: scheme and host
// lower-cased, no fragment, no trailing slash on a bare path.
func CanonicalResource(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Scheme = strings.ToLower(p.Scheme)
	p.Host = strings.ToLower(p.Host)
	p.Fragment, p.RawFragment = "", ""
	if p.Path == "/" {
		p.Path = ""
	}
	return p.String()
}

func (s *Store) fileName(issuer string) string {
	h := sha256.Sum256([]byte(issuer))
	return filepath.Join(s.dir, hex.EncodeToString(h[:12])+".json")
}

// files reads every issuer's file.
func (s *Store) files() ([]*issuerFile, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*issuerFile
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f, err := readFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func readFile(path string) (*issuerFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxStoreFile {
		return nil, fmt.Errorf("%s: larger than %d KiB", path, maxStoreFile>>10)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f issuerFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &f, nil
}

// Find returns the grant for the MCP server at resource, nil when there is
// none.
func (s *Store) Find(resource string) (*Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resource = CanonicalResource(resource)
	files, err := s.files()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		for _, g := range f.Grants {
			if g.Resource == resource && g.Issuer == f.Issuer {
				return g, nil
			}
		}
	}
	return nil, nil
}

// Put stores g under its issuer, replacing any grant for the same
// resource (under any issuer: a server whose authorization server changed
// is signed in again, and the old issuer's grant must not linger).
func (s *Store) Put(g *Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g.Resource = CanonicalResource(g.Resource)
	if err := s.removeLocked(g.Resource, g.Issuer); err != nil {
		return err
	}
	path := s.fileName(g.Issuer)
	f, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = &issuerFile{Issuer: g.Issuer}, nil
	}
	if err != nil {
		return err
	}
	f.Grants = slices.DeleteFunc(f.Grants, func(o *Grant) bool { return o.Resource == g.Resource })
	f.Grants = append(f.Grants, g)
	return s.write(path, f)
}

// Remove deletes the grants for resource; it reports whether there was one.
func (s *Store) Remove(resource string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resource = CanonicalResource(resource)
	g, err := s.findLocked(resource)
	if err != nil || g == nil {
		return false, err
	}
	return true, s.removeLocked(resource, "")
}

func (s *Store) findLocked(resource string) (*Grant, error) {
	files, err := s.files()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		for _, g := range f.Grants {
			if g.Resource == resource {
				return g, nil
			}
		}
	}
	return nil, nil
}

// removeLocked drops resource's grants from every issuer's file but keep's.
func (s *Store) removeLocked(resource, keep string) error {
	files, err := s.files()
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.Issuer == keep {
			continue
		}
		n := len(f.Grants)
		f.Grants = slices.DeleteFunc(f.Grants, func(g *Grant) bool { return g.Resource == resource })
		if len(f.Grants) == n {
			continue
		}
		path := s.fileName(f.Issuer)
		if len(f.Grants) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := s.write(path, f); err != nil {
			return err
		}
	}
	return nil
}

// write replaces path with f, readable by the user alone.
func (s *Store) write(path string, f *issuerFile) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	// A folder made earlier with a laxer mode is tightened.
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".grant-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
