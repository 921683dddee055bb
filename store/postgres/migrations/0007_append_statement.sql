-- 0007: appends in one statement (store/postgres/direct.go).
--
-- Every append from a runtime records a heartbeat in its one update of the session's row,
-- which names status in its SET list (a stale session runs again). The trigger of 0006 on
-- UPDATE OF status then ran its function for every append, to find most of the time that the
-- status had not changed. It now fires only when the status does change: the same changes are
-- recorded, without a function call per append.
DROP TRIGGER changes_session ON sessions;
CREATE TRIGGER changes_session AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION changes_on_session();
CREATE TRIGGER changes_session_status AFTER UPDATE OF status ON sessions
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION changes_on_session();
