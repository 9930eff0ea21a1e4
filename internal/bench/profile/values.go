package profile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSize reads a byte count as uperf writes them: digits with an
// optional k, m or g suffix (powers of 1024; "16k" = 16384), also written
// K, KB, KiB, M, MB, MiB, G, GB, GiB.
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(t)
	for _, suf := range []struct {
		s string
		m int64
	}{{"kib", 1 << 10}, {"kb", 1 << 10}, {"k", 1 << 10}, {"mib", 1 << 20}, {"mb", 1 << 20}, {"m", 1 << 20}, {"gib", 1 << 30}, {"gb", 1 << 30}, {"g", 1 << 30}} {
		if strings.HasSuffix(lower, suf.s) {
			mult, t = suf.m, t[:len(t)-len(suf.s)]
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || t == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with k, m or g", s)
	}
	if n > (1<<40)/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int(n * mult), nil
}

// ParseDuration reads a duration: Go's syntax (30s, 500ms, 10us, 1m30s) or
// a plain number of seconds, as uperf and Ripsaw's templates write them.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(t, 64); err == nil {
		if n < 0 || n > MaxDuration.Seconds() {
			return 0, fmt.Errorf("duration %q: out of range", s)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 30s, 500ms, 10us or a number of seconds", s)
	}
	return d, nil
}

// ParseCount reads a positive integer.
func ParseCount(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: want a whole number", s)
	}
	return n, nil
}

// errNoVar is an unknown $name.
var errNoVar = errors.New("unknown variable")

// expand replaces every $name in s (name: letters, digits, _) with its
// value from vars.
func expand(s string, vars func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		name := s[i+1 : j]
		if name == "" {
			b.WriteByte('$')
			continue
		}
		v, ok := "", false
		if vars != nil {
			v, ok = vars(name)
		}
		if !ok {
			return "", fmt.Errorf("$%s: %w (give it with --set %s=VALUE or in the environment)", name, errNoVar, name)
		}
		b.WriteString(v)
		i = j - 1
	}
	return b.String(), nil
}
