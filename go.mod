module github.com/weir-dev/weir

go 1.26.8

require golang.org/x/sys v0.49.0

require github.com/klauspost/compress v1.20.3

require github.com/cilium/ebpf v0.22.0

require (
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.yaml.in/yaml/v3 v3.0.6
)

require github.com/pierrec/lz4/v4 v4.1.33 // indirect
