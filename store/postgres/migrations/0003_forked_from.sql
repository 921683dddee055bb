-- 0003: find a session's forks (ListFilter.ForkedFrom) without scanning every session.

CREATE INDEX sessions_forked_from ON sessions ((lineage->>'forkedFromThreadId'), id)
    WHERE lineage IS NOT NULL;
