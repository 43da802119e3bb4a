package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// configCheck is the line of a configuration that does not load; nothing else can be checked.
func configCheck(err error) doctorCheck {
	return doctorCheck{Area: "home", Name: "config", Status: statusFail, Detail: err.Error(),
		Fix: "fix config.yaml or the variable named, then run hermes doctor again"}
}

// checkHome checks that the home exists and is this user's alone, that the configuration
// loads (cfgErr is config.Load's error), and that the files holding secrets (config.yaml,
// .env) are readable and readable by no one else.
func checkHome(rep *doctorReport, cfg *config.Config, cfgErr error) {
	home := os.Getenv("HERMES_HOME")
	if home == "" {
		home = config.DefaultHome()
	}
	fi, err := os.Stat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rep.add(doctorCheck{Area: "home", Name: home, Status: statusWarn, Detail: "does not exist",
			Fix: "run any hermes command to create it, or set HERMES_HOME to the home you meant"})
	case err != nil:
		rep.add(doctorCheck{Area: "home", Name: home, Status: statusFail, Detail: err.Error(), Fix: "make the home reachable by this user, or set HERMES_HOME"})
	case !fi.IsDir():
		rep.add(doctorCheck{Area: "home", Name: home, Status: statusFail, Detail: "is not a directory", Fix: "move it away, or set HERMES_HOME to a directory"})
	default:
		rep.add(homeDirCheck(home, fi.Mode().Perm()))
		rep.add(secretFileCheck(filepath.Join(home, "config.yaml")))
		c := secretFileCheck(filepath.Join(home, ".env"))
		if c.Status == statusOK && c.Detail != "none" {
			// Read it as every command does at start.
			if _, err := readDotEnv(filepath.Join(home, ".env")); err != nil {
				c.Status, c.Detail, c.Fix = statusFail, "cannot be read: "+err.Error(), "make it readable by this user (chmod 600, owned by you)"
			}
		}
		rep.add(c)
	}
	if cfgErr != nil {
		rep.add(configCheck(cfgErr))
	} else if cfg.Path != "" {
		rep.add(doctorCheck{Area: "home", Name: "config", Status: statusOK, Detail: "loads (" + cfg.Path + ")"})
	}
}

// homeDirCheck: the home must be writable, and hold sessions and keys for this user only.
func homeDirCheck(home string, perm fs.FileMode) doctorCheck {
	c := doctorCheck{Area: "home", Name: home, Status: statusOK, Detail: fmt.Sprintf("writable, mode %04o", perm)}
	f, err := os.CreateTemp(home, ".doctor-*")
	if err != nil {
		c.Status, c.Detail = statusFail, "not writable: "+err.Error()
		c.Fix = "chown the home to this user and chmod 700 " + home
		return c
	}
	f.Close()
	os.Remove(f.Name())
	if perm&0o077 != 0 {
		c.Status, c.Detail = statusWarn, fmt.Sprintf("mode %04o: other users can enter it", perm)
		c.Fix = "chmod 700 " + home
	}
	return c
}

// secretFileCheck: a file that may hold keys is readable by its owner only.
func secretFileCheck(path string) doctorCheck {
	c := doctorCheck{Area: "home", Name: filepath.Base(path), Status: statusOK}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Detail = "none"
		return c
	case err != nil:
		c.Status, c.Detail, c.Fix = statusFail, err.Error(), "make "+path+" readable by this user"
		return c
	}
	perm := fi.Mode().Perm()
	c.Detail = fmt.Sprintf("mode %04o", perm)
	switch {
	case perm&0o004 != 0:
		c.Status, c.Detail = statusFail, fmt.Sprintf("mode %04o: every user can read the keys it may hold", perm)
	case perm&0o070 != 0:
		c.Status, c.Detail = statusWarn, fmt.Sprintf("mode %04o: the group can read the keys it may hold", perm)
	}
	if c.Status != statusOK {
		c.Fix = "chmod 600 " + path
	}
	return c
}

// weakKeys are placeholder words: a key made of them (or containing one) was never chosen.
var weakKeys = []string{"changeme", "replaceme", "placeholder", "yourapikey", "yourkey", "apikeyhere", "example", "password", "secret", "letmein", "default", "xxxxxxxx", "12345678", "abcdefgh", "qwerty"}

// checkKeys looks at the API keys hermes serve accepts: at least httpapi.MinKeyLength
// characters (serve refuses shorter ones), not one character class only, no placeholder, no
// key given twice. A key is named by where it is configured, never shown.
func checkKeys(rep *doctorReport, cfg *config.Config) {
	type named struct{ name, key string }
	keys := []named{}
	if cfg.Server.APIKey != "" {
		keys = append(keys, named{"api_key", cfg.Server.APIKey})
	} else if k, ok := storedKey(cfg); ok {
		keys = append(keys, named{"api_key", k}) // what hermes serve created and uses (serverKey)
	}
	for i, k := range cfg.Server.ExtraKeys {
		n := fmt.Sprintf("extra_api_keys[%d]", i)
		if k.Name != "" {
			n = fmt.Sprintf("extra_api_keys %q", k.Name)
		}
		keys = append(keys, named{n, k.Key})
	}
	if cfg.Server.AdminKey != "" {
		keys = append(keys, named{"admin_api_key", cfg.Server.AdminKey})
	}
	if len(keys) == 0 {
		rep.add(doctorCheck{Area: "keys", Name: "api_key", Status: statusOK,
			Detail: "not set: hermes serve creates a random one in " + keyFile(cfg) + " on its first start"})
		return
	}
	seen := map[string]string{}
	for _, k := range keys {
		c := doctorCheck{Area: "keys", Name: k.name, Status: statusOK, Detail: fmt.Sprintf("%d characters", len(k.key))}
		where := "server." + k.name + " in config.yaml"
		if k.name == "api_key" {
			where = "HERMES_API_KEY (or server.api_key)"
			if cfg.Server.APIKey == "" {
				where = keyFile(cfg)
			}
		}
		fix := "replace " + where + " with a random key: openssl rand -hex 32"
		switch problem, fatal := keyWeakness(k.key); {
		case seen[k.key] != "":
			c.Status, c.Detail, c.Fix = statusFail, "the same key as "+seen[k.key]+": hermes serve refuses a key given twice", fix
		case problem != "" && fatal:
			c.Status, c.Detail, c.Fix = statusFail, problem, fix
		case problem != "":
			c.Status, c.Detail, c.Fix = statusWarn, problem, fix
		}
		if seen[k.key] == "" {
			seen[k.key] = k.name
		}
		rep.add(c)
	}
}

// keyWeakness says what is wrong with an API key, and whether serve refuses it or it is a
// guessable placeholder (fatal) rather than merely weak.
func keyWeakness(key string) (problem string, fatal bool) {
	if len(key) < httpapi.MinKeyLength {
		return fmt.Sprintf("%d characters: hermes serve refuses keys shorter than %d", len(key), httpapi.MinKeyLength), true
	}
	norm := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, key)
	for _, w := range weakKeys {
		if strings.Contains(norm, w) {
			return fmt.Sprintf("a placeholder (it contains %q, a well-known placeholder), not a chosen key", w), true
		}
	}
	classes := map[string]bool{}
	distinct := map[rune]bool{}
	for _, r := range key {
		distinct[r] = true
		switch {
		case unicode.IsLower(r):
			classes["lower"] = true
		case unicode.IsUpper(r):
			classes["upper"] = true
		case unicode.IsDigit(r):
			classes["digit"] = true
		default:
			classes["symbol"] = true
		}
	}
	if len(distinct) < 8 {
		return fmt.Sprintf("only %d different characters: easy to guess", len(distinct)), false
	}
	if len(classes) == 1 {
		return "one kind of character only (all letters of one case, or all digits): weaker than a random key", false
	}
	return "", false
}
