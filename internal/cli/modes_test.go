package cli

import (
	"flag"
	"testing"
)

func TestCheckModes(t *testing.T) {
	rules := []ModeRule{
		{"workers ring-", 1, "need mode one"},
		{"netns i", 2 | 4, "need mode two or three"},
	}
	for _, tc := range []struct {
		args []string
		m    uint
		want string
	}{
		{[]string{"--workers", "2", "--ring-size", "3"}, 1, ""},
		{[]string{"--ring-size", "3", "--workers", "2"}, 2, "--ring-size, --workers need mode one"},
		{[]string{"--netns", "x", "-i", "y"}, 1, "-i, --netns need mode two or three"},
		{[]string{"--netns", "x", "--workers", "1"}, 4, "--workers need mode one"},
		{[]string{"--other", "1"}, 8, ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		for _, n := range []string{"workers", "ring-size", "netns", "i", "other"} {
			fs.String(n, "", "")
		}
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := CheckModes(fs, rules, tc.m)
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("%v in mode %d: %q, want %q", tc.args, tc.m, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%v in mode %d: accepted, want %q", tc.args, tc.m, tc.want)
		}
	}
}
