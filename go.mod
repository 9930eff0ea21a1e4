module github.com/weir-dev/weir

go 1.26.8

require golang.org/x/sys v0.49.0

require github.com/klauspost/compress v1.18.2

require github.com/cilium/ebpf v0.22.0

require go.yaml.in/yaml/v3 v3.0.6
