// Package benchkit holds what the product's benchmarks and the peer benchmark (the bench
// module) share: the peer benchmark's realistic agent events (a generator of valid ~475-byte
// events with UUIDv4 or UUIDv7 ids and keys), and programs run as measured processes — the
// sessiond binary built from this tree, a PostgreSQL cluster of its own, any server on a free
// loopback port — whose CPU time and storage writes are read from /proc.
//
// It imports nothing outside the product's own dependencies: the Redis and NATS clients the
// peer benchmark needs live in the bench module, not in the product's go.mod.
package benchkit
