"""Which replica takes a request: consistent hashing (`ring`), where each key went
(`placements`), and the policies, pure decisions over the state they are handed (`policies`)."""
