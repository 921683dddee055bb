// Package sdk holds the tests of sessiond's client SDKs, which live beside it: sdk/typescript
// (an ESM package for Node 20 and browsers, with no runtime dependencies) and sdk/python (a
// standard-library package for Python 3.11). Their contract modules (typescript/src/contract.ts
// and python/sessiond/contract.py) are generated from package contract by
// `go test ./contract -run TestSDKContract -update`. The tests build and start the real
// sessiond binary and run each SDK's own tests and the snippets of docs/sdk.md against it.
// The package has no Go code to import.
package sdk
