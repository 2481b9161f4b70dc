"""Writer: Packs -> an Energon dataset directory (shards, .nv-meta, manifest, rejects)."""
