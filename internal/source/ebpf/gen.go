package ebpf

// The kernel program is compiled by `make generate` (clang and libbpf-dev
// from Debian, installed by scripts/deps.sh generate); the objects and
// bindings are committed, so a normal build and `make test` need no clang.
// The -I directories are Debian's multiarch homes of asm/types.h.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel,bpfeb -type flow_key -type flow_val -type overflow_rec flow bpf/flow.c

// The map-design variants BenchmarkMapDesign compares (test data only).
//go:generate clang -O2 -g -Wall -Werror -mcpu=v3 -target bpfel -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu -c bpf/variants.c -o testdata/variants.o
//go:generate llvm-strip -g testdata/variants.o
