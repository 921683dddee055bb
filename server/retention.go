package server

import "time"

// startRetention applies the retention policy every RetentionInterval until Close, when the
// policy has a rule and there is an archive directory. A pass in progress at Close is
// cancelled: archives are written atomically and a deletion is one unlink, so
// an interrupted pass leaves nothing half done.
func (s *Server) startRetention() {
	if !s.opt.Retention.Enabled() || s.opt.ArchiveDir == "" {
		return
	}
	s.every(s.opt.RetentionInterval, s.retain, nil)
}

// retain runs one retention pass, logs it and counts it in the metrics.
func (s *Server) retain() {
	start := time.Now()
	p := s.opt.Retention
	plan, err := s.svc.ApplyRetention(s.life, s.opt.ArchiveDir, p)
	s.opt.Metrics.retained(plan, p.DeleteArchivesAfter > 0 || p.MaxArchiveBytes > 0, err)
	switch {
	case err != nil:
		s.opt.Logger.Error("retention pass failed; retrying at the next interval", "err", err)
		return
	case len(plan.Errors) > 0:
		s.opt.Logger.Error("retention pass: some actions failed", "errors", plan.Errors)
	}
	if len(plan.Archive)+len(plan.Delete)+len(plan.Errors) > 0 {
		s.opt.Logger.Info("retention", "archived", len(plan.Archive), "deleted", len(plan.Delete), "keptLastCopy", len(plan.Kept),
			"failed", len(plan.Errors), "archiveBytes", plan.ArchiveBytesAfter, "took_ms", milliseconds(time.Since(start)))
	}
	for _, a := range plan.Kept {
		s.opt.Logger.Debug("retention kept a last copy", "archive", a.Name, "session", a.SessionID, "why", a.Detail)
	}
}
