"""Which replica takes a request: consistent hashing (`ring`), where each key went
(`placements`), what this instance knows of every instance's placements and load (`fleet`),
the policies, pure decisions over the state they are handed (`policies`), and the background
exchange with the other instances through Redis (`redis_sync`)."""
