"""Files at the gateway: a session's files, reached through the tool worker that holds its
sandbox (`session_files`), and a task's artifacts, served from the artifact store; their
request dependencies (`deps`) and API models (`models`)."""
