# weir — the two commands that matter: `make run` and `make test`.
# Both install what they need first (scripts/deps.sh is idempotent).

GO        ?= go
BIN       := bin/weir
SAMPLE    := build/sample.pcapng
FUZZTIME  ?= 60s
BENCHCOUNT ?= 5
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)


.PHONY: fleet-demo run replay test lint bench fuzz chaos build sample generate web install dist deps-run deps-test deps-lint clean

# IFACE: the interface `make run` watches: the default route's, else every one.
IFACE     ?= $(shell ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($$i == "dev") { print $$(i+1); exit }}')
DURATION  ?= 0

## run: weir's main job — watch the default-route interface live: top flows every 5s,
##      metrics on 127.0.0.1:9464/metrics, every record stored in ./weir-data (query it
##      with bin/weir query talk_conv), counters at exit (Ctrl-C, or DURATION=1m)
run: deps-run build
	$(BIN) capture -i $(or $(IFACE),any) --top 15 --interval 5s --duration $(DURATION) --stats

## replay: the file path — replay the generated sample capture and show the top flows
replay: deps-run build sample
	$(BIN) capture --read $(SAMPLE) --top 25 --stats

## test: the whole suite (installs tshark etc. first), after the linter
test: deps-test lint
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 15m ./...
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory fleet-demo; else echo 'make test: fleet-demo skipped: it needs root (network namespaces)'; fi

## lint: golangci-lint (.golangci.yml; the pinned version is built into build/bin once),
##       and vet as darwin, freebsd and 386 (type checks the tests too) so the
##       other systems and 32-bit ints keep building
lint: deps-lint
	build/bin/golangci-lint run ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...
	GOARCH=386 $(GO) vet ./...

## fleet-demo: three test hosts (network namespaces), a weir agent each with --node-name,
##             exporting to a real Kafka broker that ClickHouse ingests; one query answers
##             for all three (root; scripts/fleet-demo.sh)
fleet-demo: build
	@scripts/deps.sh fleet
	scripts/fleet-demo.sh

## bench: the headline numbers (docs/benchmarks.md explains them)
bench: build
	@scripts/deps.sh bench
	scripts/bench.sh $(BENCHCOUNT)

## fuzz: run every fuzz target for FUZZTIME each (default 60s)
fuzz: deps-run
	scripts/fuzz.sh $(FUZZTIME)

## chaos: the hostile probes of docs/reliability.md against bin/weir (kill -9 during
##        writes, full disk as root, damaged blocks, floods, slow clients): one table,
##        at most 10 minutes, loopback only; fails if any case does
chaos: deps-run
	scripts/chaos.sh

## generate: recompile the eBPF program (internal/source/ebpf/bpf) with clang and refresh
##           its committed objects and Go bindings; a normal build does not need it
generate:
	@scripts/deps.sh generate
	$(GO) generate ./internal/source/ebpf

## web: rebuild the console (web/dist, committed and embedded) from web/src: npm ci,
##      type check, esbuild; web's Go test fails when dist/ does not match the sources
web:
	cd web && npm ci --no-audit --no-fund && npx tsc --noEmit -p . && node build.mjs

# Without cgo: a static binary, and one that can drop its capabilities on
# every thread once its sources are open (Go's runtime cannot with cgo).
build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/weir

## install: the binary, man pages, shell completions, systemd units and sample
##          configs under DESTDIR/PREFIX (default /usr/local); an existing
##          /etc/weir/*.yaml is never overwritten. The units run as user weir:
##          systemd-sysusers $(PREFIX)/lib/sysusers.d/weir.conf creates it
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
install: build
	rm -rf build/install-gen && mkdir -p build/install-gen/man
	$(BIN) _gendocs --man build/install-gen/man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/site-functions \
		$(DESTDIR)$(DATADIR)/fish/vendor_completions.d $(DESTDIR)$(DATADIR)/weir/examples \
		$(DESTDIR)$(SYSUSERSDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/weir
	install -m 0644 build/install-gen/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	$(BIN) completion bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/weir
	$(BIN) completion zsh > $(DESTDIR)$(DATADIR)/zsh/site-functions/_weir
	$(BIN) completion fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/weir.fish
	for u in deploy/systemd/*.service; do \
		sed 's|/usr/local/bin/weir|$(BINDIR)/weir|g' $$u > $(DESTDIR)$(UNITDIR)/$${u##*/} && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; done
	install -m 0644 deploy/sysusers/weir.conf $(DESTDIR)$(SYSUSERSDIR)/weir.conf
	install -m 0644 deploy/config/*.yaml $(DESTDIR)$(DATADIR)/weir/examples/
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/weir
	for c in deploy/config/*.yaml; do \
		t=$(DESTDIR)$(SYSCONFDIR)/weir/$${c##*/}; \
		[ -e $$t ] || install -m 0644 $$c $$t || exit 1; done

## dist: static release binaries (CGO_ENABLED=0, version stamped) for every
##       supported platform, with SHA256SUMS, in build/dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64 freebsd/amd64
dist:
	rm -rf build/dist && mkdir -p build/dist
	for p in $(DIST_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o build/dist/weir-$(VERSION)-$${p%/*}-$${p#*/} ./cmd/weir || exit 1; done
	cd build/dist && sha256sum weir-* > SHA256SUMS

## sample: a deterministic capture with known traffic (see internal/craft)
sample:
	@mkdir -p build
	$(GO) run ./internal/tools/mksample -o $(SAMPLE)

deps-run:
	@scripts/deps.sh run

deps-test:
	@scripts/deps.sh test

deps-lint:
	@scripts/deps.sh lint

clean:
	rm -rf bin build
