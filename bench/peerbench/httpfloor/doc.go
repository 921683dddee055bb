// Command httpfloor is the peer benchmark's floor: the part of sessiond's HTTP API the
// benchmark's client uses, served by Go's net/http with the least work an idempotent session
// log over HTTP can do, and nothing else. It keeps sessions in memory (no storage, no sync: it
// is not durable), finds an event's idempotency key by scanning its line (no parsing, no
// validation), answers a key it has seen as a duplicate, and numbers the others.
//
// Its figures, measured in the same run as the systems, bound from above what any system
// answering the same requests through Go's HTTP/1.1 server can reach with the same client on
// the same machine: the cost of HTTP on both ends, with the system's own work taken out.
//
//	httpfloor --addr 127.0.0.1:7499
//
// The routes, as sessiond's, with the same request parsing (a query parameter the route does
// not take is refused; every answer carries an X-Request-Id) and answers of the same shapes
// and sizes: POST /v1/sessions (a JSON body with "session_id"), POST /v1/sessions/{id}/events
// (NDJSON; each event stored with its sequence; {"results":[…],"lastSequence":n}, 201 when
// something was added, 200 when every event was a duplicate), GET
// /v1/sessions/{id}/events?after=&limit= ({"events":[…],"lastSequence":n}, the events as
// stored), GET /v1/sessions/{id}/events/export?after= (NDJSON to the log's end, written in
// chunks of 2,048 events, with Sessiond-Last-Sequence) and GET
// /v1/sessions/{id}/events/stream?tail=true (server-sent events from the session's end: the
// opening block, then id, event and data lines per event).
package main
