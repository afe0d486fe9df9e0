"""A session's files (`/v1/sessions/{session_id}/files`), reached through the tool worker that
holds its sandbox (`session_files`); their request dependencies (`deps`)."""
