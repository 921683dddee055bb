// Package search is sessiond's full-text search across sessions: what of an event is
// searchable (Extract, one pure function both drivers index with), the query language and its
// parameters (Query, ParseTerms), snippets (Snippet), opaque page cursors, the Backend
// interface each storage driver implements (SQLite: FTS5 in a file beside the store;
// PostgreSQL: tsvector with GIN and pg_trgm), and the Indexer that keeps a backend up to date
// with the store's logs from a durable cursor, asynchronously, off the append path.
//
// docs/search.md describes the behaviour for users: the fields, the query syntax, the
// filters, ordering and pagination, and what is searchable after archive, compaction and forks.
package search
