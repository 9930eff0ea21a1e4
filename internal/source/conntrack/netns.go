package conntrack

import "fmt"

// Netns identifies a network namespace as the kernel sees it: the inode
// of its nsfs file (what /proc/PID/ns/net links to, net:[INODE]) and,
// when a file under /run/netns (ip netns add) is a bind mount of it, that
// name.
type Netns struct {
	Inode   uint64
	Dev     uint64
	Name    string // the /run/netns name, "" if none
	Initial bool   // the initial namespace (PID 1's), the host's
}

// String names the namespace for people: "namespace blue (net:[4026532177])",
// "the host's namespace (net:[4026531840])", or "namespace net:[4026532177]".
// Name comes from a file name: it is quoted if it holds anything but
// printable ASCII.
func (n Netns) String() string {
	id := fmt.Sprintf("net:[%d]", n.Inode)
	switch {
	case n.Inode == 0:
		return "an unidentified namespace"
	case n.Name != "":
		return fmt.Sprintf("namespace %s (%s)", safeName(n.Name), id)
	case n.Initial:
		return "the host's namespace (" + id + ")"
	default:
		return "namespace " + id
	}
}

// safeName returns s as is if it is printable ASCII without spaces, else
// quoted with Go escapes, so that a file name cannot drive a terminal.
func safeName(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\' {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}
