# sessiond developer tasks. Run 'make help' for the list.
GO ?= go
PKGS ?= ./...
# staticcheck, pinned (2026.2.2); .ci/run runs the same version.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: help build run test bench lint fuzz sim failover

help: ## show this help
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the sessiond binary into ./sessiond
	$(GO) build -o sessiond ./cmd/sessiond

run: ## run the server on the embedded default (SQLite in ./sessiond-data)
	$(GO) run ./cmd/sessiond serve

test: ## run every test (the README's test command)
	$(GO) test ./...

bench: ## run the benchmarks recorded in docs/benchmarks.md (PostgreSQL's too when SESSIOND_TEST_POSTGRES is set)
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./contract/ ./store/sqlite/ ./session/
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 5 ./server/
	$(GO) test -run '^$$' -bench . -count 5 ./store/postgres/

lint: ## gofmt, go vet and staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'run gofmt -w on the files above'; exit 1)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) -C bench vet ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

fuzz: ## fuzz the contract parser and validator for a minute each
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 1m ./contract/
	$(GO) test -run '^$$' -fuzz FuzzEventAgainstOracle -fuzztime 1m ./contract/

SEED ?= 1
OPS ?= 5000
DURATION ?= 1m
sim: ## simulate the session semantics against the model: seeds from SEED, OPS ops each, for DURATION (SQLite; PostgreSQL too when SESSIOND_TEST_POSTGRES is set)
	$(GO) test -run '^TestSimulation$$' -count 1 -v -timeout 0 ./internal/sim/ -args -sim.seed $(SEED) -sim.ops $(OPS) -sim.duration $(DURATION)

SWITCHES ?= 20
failover: ## switch a PostgreSQL primary and its synchronous standby SWITCHES times under two sessiond instances (docs/deploy.md)
	$(GO) test -run '^TestFailover$$' -count 1 -v -timeout 0 ./internal/failover/ -args -failover.switches $(SWITCHES)
