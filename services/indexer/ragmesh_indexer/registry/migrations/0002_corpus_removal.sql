-- `ragmesh corpus remove`: a removed corpus keeps its row and its retired versions, so the audit
-- trail (index_version_events) stays whole, but no read or move sees it any more. Building the
-- corpus again clears removed_at and starts afresh.
ALTER TABLE corpora ADD COLUMN removed_at timestamptz;
