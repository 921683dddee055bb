// Package sdk holds the tests of sessiond's client SDKs, which live beside it: sdk/typescript
// (an ESM package for Node 20 and browsers, with no runtime dependencies) and sdk/python (a
// standard-library package for Python 3.11). Their contract modules (typescript/src/contract.ts
// and python/sessiond/contract.py) are generated from package contract by
// `go test ./contract -run TestSDKContract -update`. The TypeScript package's entry points
// @sessiond/sdk/ai, @sessiond/sdk/openai-agents and @sessiond/sdk/langgraph adapt the Vercel AI
// SDK, the OpenAI Agents SDK and LangGraph.js (optional peer dependencies). The tests build and
// start the real sessiond binary and run each SDK's own tests (the adapters' with the real
// frameworks, offline), the snippets of docs/sdk.md, the workers of both SDKs as real processes
// under chaos (chaos_test.go) and the examples examples/aisdk-worker and examples/python-worker
// (examples_test.go) against it. The package has no Go code to import.
package sdk
