# dshmount build, test and benchmark entry points.
GO        ?= go
BIN       := bin/dshmount
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
PKGS      := ./...
FUZZTIME  ?= 60s
export PATH := $(PATH):/usr/local/go/bin:$(shell $(GO) env GOPATH 2>/dev/null)/bin

PREFIX    ?= /usr/local

.PHONY: all build install deps test test-race test-short bench bench-go fuzz lint lint-basic demo deps-demo clean

all: build

## build: compile the dshmount binary into bin/
build:
	$(GO) build -ldflags "-X main.stampedVersion=$(VERSION)" -o $(BIN) ./cmd/dshmount

## install: build, then copy the binary to $(PREFIX)/bin (PREFIX defaults to /usr/local)
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/dshmount

## deps: install the Debian packages the tests drive (as root; otherwise print the apt-get line)
deps:
	@bash scripts/deps.sh test

## test: deps, vet, format check, then every test with the race detector (real FUSE mounts included)
test: deps lint-basic build
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

## test-race: alias of test (the suite always runs with -race)
test-race: test

## test-short: unit tests only, without -race and without the integration mounts
test-short:
	$(GO) test -count=1 -short $(PKGS)

## bench: native disk vs plain go-fuse loopback vs dshmount (as root; writes bench/results.json)
bench: build
	$(GO) build -o bin/dshbench ./bench/cmd/dshbench
	$(GO) build -o bin/bench-loopback ./bench/loopback
	./bin/dshbench run --dshmount $(BIN) --loopback bin/bench-loopback --out bench/results.json $(BENCHFLAGS)

## bench-go: Go benchmarks of every package (ns/op, allocs)
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 200x ./internal/provider/... ./patch/... ./internal/merge/... ./internal/policy/... ./control/... ./internal/viewrules/... ./internal/seen/...

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	GO=$(GO) bash scripts/fuzz.sh ./patch/ FuzzParse $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./patch/ FuzzApplyHunks $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./control/ FuzzDispatch $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./control/ FuzzDecodeLine $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/policy/ FuzzMarshalRecords $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/merge/ FuzzMerge $(FUZZTIME)

lint-basic:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## lint: go vet, gofmt check and staticcheck (installed from the module proxy when missing)
lint: lint-basic
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	staticcheck $(PKGS)

## demo: mount the example workspace and show the guard at work
demo: deps-demo build
	bash scripts/demo.sh

deps-demo:
	@bash scripts/deps.sh demo

clean:
	rm -rf bin
