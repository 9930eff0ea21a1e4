package conntrack

import "testing"

// TestNetnsString: the start line's name of a namespace, with a name
// from /run/netns escaped when it could drive a terminal.
func TestNetnsString(t *testing.T) {
	for _, c := range []struct {
		n    Netns
		want string
	}{
		{Netns{Inode: 4026531840, Initial: true}, "the host's namespace (net:[4026531840])"},
		{Netns{Inode: 4026532177, Name: "blue"}, "namespace blue (net:[4026532177])"},
		{Netns{Inode: 4026532177}, "namespace net:[4026532177]"},
		{Netns{Inode: 7, Name: "a\x1b[31mred"}, `namespace "a\x1b[31mred" (net:[7])`},
		{Netns{Inode: 7, Name: "two words"}, `namespace "two words" (net:[7])`},
		{Netns{}, "an unidentified namespace"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}
