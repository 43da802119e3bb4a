package stdlib

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
)

// Grants are the capabilities a configuration grants to scripts. The zero value grants
// nothing: no file system, no network.
type Grants struct {
	FS   []string // directories fs may reach
	HTTP []string // hosts (or host:port) http may reach
}

// ParseGrants reads grant strings: "fs" (the working directory cwd), "fs:DIR", and
// "http:HOST" or "http:HOST:PORT". Anything else is an error, so a typo never silently grants
// less (or more) than meant.
func ParseGrants(list []string, cwd string) (Grants, error) {
	var g Grants
	for _, s := range list {
		kind, arg, _ := strings.Cut(strings.TrimSpace(s), ":")
		switch {
		case kind == "fs" && arg == "":
			if cwd == "" {
				return Grants{}, fmt.Errorf("grant %q: no working directory to grant", s)
			}
			g.FS = append(g.FS, cwd)
		case kind == "fs":
			if strings.HasPrefix(arg, "~/") || !filepath.IsAbs(arg) && cwd != "" {
				if strings.HasPrefix(arg, "~/") {
					return Grants{}, fmt.Errorf("grant %q: write the directory as an absolute path", s)
				}
				arg = filepath.Join(cwd, arg)
			}
			g.FS = append(g.FS, arg)
		case kind == "http" && arg != "":
			g.HTTP = append(g.HTTP, strings.ToLower(arg))
		case kind == "http":
			return Grants{}, fmt.Errorf("grant %q: name the hosts scripts may reach, e.g. http:api.example.com", s)
		default:
			return Grants{}, fmt.Errorf("unknown grant %q (want fs, fs:DIR or http:HOST)", s)
		}
	}
	return g, nil
}

// Modules builds the granted capability modules (none for the zero Grants).
func (g Grants) Modules(client *http.Client) ([]*Module, error) {
	var out []*Module
	if len(g.FS) > 0 {
		m, err := FS(g.FS)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(g.HTTP) > 0 {
		m, err := HTTP(client, g.HTTP)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
