package kafka

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseURL: the defaults, every option, and a clear error for each
// mistake (the wrong part named, secrets never taken from the URL).
func TestParseURL(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseURL("kafka://k1,k2:9093,[::1]:9094/flows")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, " ") != "k1:9092 k2:9093 [::1]:9094" || c.Topic != "flows" || c.Compression != "zstd" ||
		c.Acks != "all" || c.TLS != nil || c.SASL != "" || c.BufferRecords != DefaultBufferRecords || c.CloseTimeout != DefaultCloseTimeout {
		t.Errorf("defaults: %+v", c)
	}
	c, err = ParseURL("kafka://k1/t?compression=lz4&acks=leader&tls=1&sasl=scram-sha-512&user=weir&password-file=" + pw +
		"&buffer-records=1000&buffer-bytes=1048576&linger=50ms&close-timeout=2s&client-id=agent-1&server-name=kafka.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.Compression != "lz4" || c.Acks != "leader" || c.TLS == nil || c.TLS.ServerName != "kafka.example" || c.SASL != "scram-sha-512" ||
		c.User != "weir" || c.Password != "s3cret" || c.BufferRecords != 1000 || c.BufferBytes != 1<<20 ||
		c.Linger != 50*time.Millisecond || c.CloseTimeout != 2*time.Second || c.ClientID != "agent-1" {
		t.Errorf("options: %+v", c)
	}
	for _, bad := range []struct{ url, want string }{
		{"ipfix+udp://k1/t", "want kafka://"},
		{"kafka://k1", "topic"},
		{"kafka://k1/a/b", "topic"},
		{"kafka://k1/t%20x", "topic"},
		{"kafka://k1:0/t", "broker"},
		{"kafka://k1:x/t", "broker"},
		{"kafka://user:pw@k1/t", "password-file"},
		{"kafka://k1/t?compression=brotli", "compression=brotli"},
		{"kafka://k1/t?acks=2", "acks=2"},
		{"kafka://k1/t?tls=yes", "tls=yes"},
		{"kafka://k1/t?ca=/x", "need tls=1"},
		{"kafka://k1/t?tls=1&ca=/nonexistent", "ca:"},
		{"kafka://k1/t?tls=1&cert=/x", "both cert"},
		{"kafka://k1/t?sasl=plain&user=u&password-file=" + pw, "in clear"},
		{"kafka://k1/t?sasl=scram-sha-1&user=u&password-file=" + pw, "sasl=scram-sha-1"},
		{"kafka://k1/t?sasl=plain&tls=1", "needs user"},
		{"kafka://k1/t?user=u", "need sasl"},
		{"kafka://k1/t?sasl=scram-sha-256&user=u&password-file=" + dir, "regular file"},
		{"kafka://k1/t?password=x", "unknown option"},
		{"kafka://k1/t?acks=all&acks=none", "2 times"},
		{"kafka://k1/t?buffer-records=0", "buffer-records=0"},
		{"kafka://k1/t?linger=-1s", "linger=-1s"},
		{"kafka://k1/t?client-id=a;b", "options"},
		{"kafka://k1/t?client-id=a%2Fb", "client-id"},
	} {
		_, err := ParseURL(bad.url)
		if !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an ErrURL naming %q", bad.url, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: the error shows the credentials: %v", bad.url, err)
		}
	}
	// sasl=plain over plaintext only when asked for in so many words
	if _, err := ParseURL("kafka://k1/t?sasl=plain&user=u&allow-plaintext-sasl=1&password-file=" + pw); err != nil {
		t.Error(err)
	}
}
