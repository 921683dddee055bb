// Package failover holds the failover test (tests only): two sessiond instances on a
// PostgreSQL primary with a synchronous standby, built from PostgreSQL's own programs on
// loopback ports, while the primary is killed or frozen, the standby promoted and the old
// primary rebuilt as the new standby, switch after switch; writers, streams, a change-feed
// follower and `sessiond tail` must see no acknowledged event lost, no gap, no duplicate and no
// INTERNAL answer, and writes must be accepted again within seconds of each promotion. Its
// commands are docs/deploy.md's high-availability recipe, which TestRecipeIsTheDocs keeps equal
// to them. `make failover SWITCHES=20` runs more switches.
package failover
