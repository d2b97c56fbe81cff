"""A Streamlit session without a browser: ``WireSession`` speaks the app's websocket protocol (protobuf
``BackMsg`` out, ``ForwardMsg`` in) the way the Streamlit frontend does, so the server does for it exactly what it
does for a person (one script run per request, every delta built and sent), while nothing is drawn on this
machine. ``benchmarks/dashboard_speed.py`` uses it for people whose browsers run on computers of their own.

What the frontend sends was read off the real one (Chromium on ``streamlit run app.py``): the first run carries
the page's query string and no page hash; a click in the page navigation sends the target page's
``page_script_hash`` with an empty query string (the app writes its parameters back itself). Widget states are
not sent: the app keeps every widget's value in session state (``state.keep_widget_state``), so a run without
them draws the same page. No message hashes are reported as cached, so the server sends every message whole
(a browser that has drawn the page before is sent some of them by reference: this client costs the server at
least as much as a browser).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

WAIT_S = 120.0


@dataclass
class WireSession:
    """One session on a running server (``await WireSession.open(url, query)``), and what its script runs
    showed: the pages the app lists, each run's start and end, and any exception drawn."""

    ws: object
    pages: dict[str, str] = field(default_factory=dict)  # url path → page_script_hash (from the navigation)
    started: list[float] = field(default_factory=list)  # perf_counter at each new_session (a script run began)
    finished: list[tuple[float, int]] = field(default_factory=list)  # (perf_counter, ScriptFinishedStatus)
    exceptions: list[str] = field(default_factory=list)  # messages of exception elements the runs drew
    texts: list[str] = field(default_factory=list)  # bodies of the markdown/html elements of the latest run
    received_bytes: int = 0
    _reader: asyncio.Task | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def open(cls, url: str, query: str = "", timeout: float = WAIT_S) -> WireSession:
        """Connect to the server at ``url`` (``http://host:port``) and run its page for ``query`` (the URL's
        query string, without "?") until that run has ended."""
        from websockets.asyncio.client import connect

        ws_url = url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream"
        ws = await connect(ws_url, subprotocols=["streamlit"], origin=url, max_size=None, open_timeout=timeout)
        s = cls(ws)
        s._reader = asyncio.create_task(s._read())
        await s.run(query=query, timeout=timeout)
        return s

    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        async for data in self.ws:
            if isinstance(data, str):
                continue
            self.received_bytes += len(data)
            msg = ForwardMsg.FromString(data)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.started.append(time.perf_counter())
                self.texts = []
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
            elif kind == "script_finished":
                self.finished.append((time.perf_counter(), msg.script_finished))
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                what = el.WhichOneof("type")
                if what == "exception":
                    self.exceptions.append(f"{el.exception.type}: {el.exception.message}")
                elif what in ("markdown", "html"):
                    self.texts.append(getattr(el, what).body)
            self._changed.set()

    async def run(self, query: str = "", page: str | None = None, timeout: float = WAIT_S) -> float:
        """Ask for one script run (of page ``page``, a url path the navigation lists, or of the query's page) as the
        frontend does, and wait until a run that was not cut short for a rerun has ended; returns the seconds from
        the request to that end."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = query
        if page is not None:
            state.page_script_hash = self.pages[page]
        info = state.context_info
        info.timezone, info.timezone_offset, info.locale = "UTC", 0, "en-US"
        n = len(self.finished)
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        early = ForwardMsg.FINISHED_EARLY_FOR_RERUN
        while True:
            done = [t for t, status in self.finished[n:] if status != early]
            if done:
                return done[0] - t0
            if self._reader is not None and self._reader.done():
                raise ConnectionError(f"the server closed the session ({self._reader.exception()!r})")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, timeout - (time.perf_counter() - t0)))
            except TimeoutError:
                raise TimeoutError(f"no script run ended within {timeout:g} s") from None

    async def nav(self, page: str, timeout: float = WAIT_S) -> float:
        """A click on page ``page`` (its url path, e.g. "compare") in the navigation; seconds until its run ended."""
        return await self.run(page=page, timeout=timeout)

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
