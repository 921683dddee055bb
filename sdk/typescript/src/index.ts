// @sessiond/sdk: the TypeScript client and worker of sessiond.
export * from "./contract.js";
export * from "./client.js";
export * from "./worker.js";
