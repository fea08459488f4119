"""An ``InMemorySaver`` with every optional checkpointer method (the conformance suite's
``copy_thread``, ``delete_for_runs`` and ``prune``): what a saver that implements them all looks like
to the erasure's key store and its wrappers."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver


class FullInMemorySaver(InMemorySaver):
    """``InMemorySaver`` plus ``copy_thread``, ``delete_for_runs`` and ``prune`` (sync and async)."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src, dst = str(source_thread_id), str(target_thread_id)
        for ns, cps in list((self.storage.get(src) or {}).items()):
            self.storage[dst][ns].update(cps)
        for (t, ns, cid), ws in list(self.writes.items()):
            if t == src:
                self.writes[(dst, ns, cid)] = dict(ws)
        for (t, ns, ch, ver), blob in list(self.blobs.items()):
            if t == src:
                self.blobs[(dst, ns, ch, ver)] = blob

    def delete_for_runs(self, run_ids) -> None:
        runs = {str(r) for r in run_ids}
        for t, nss in list(self.storage.items()):
            for ns, cps in list(nss.items()):
                for cid, (_, meta, _) in list(cps.items()):
                    run = self.serde.loads_typed(meta).get("run_id")
                    if run is not None and str(run) in runs:
                        del cps[cid]
                        self.writes.pop((t, ns, cid), None)

    def prune(self, thread_ids, *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        for t in map(str, thread_ids):
            if strategy == "delete":
                self.delete_thread(t)
                continue
            for ns, cps in list((self.storage.get(t) or {}).items()):
                if not cps:
                    continue
                latest = max(cps)
                versions = self.serde.loads_typed(cps[latest][0])["channel_versions"]
                for cid in [c for c in cps if c != latest]:
                    del cps[cid]
                    self.writes.pop((t, ns, cid), None)
                for key in [k for k in self.blobs if k[:2] == (t, ns) and versions.get(k[2]) != k[3]]:
                    del self.blobs[key]

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids) -> None:
        self.delete_for_runs(run_ids)

    async def aprune(self, thread_ids, *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)
