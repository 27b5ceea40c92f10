"""Waiting on a file descriptor from asyncio: how a stream the engine's thread writes (its
eventfd) wakes the task reading it, with no thread waiting per stream."""

from __future__ import annotations

import asyncio


async def readable(fd: int, timeout: float | None = None) -> None:
    """Returns once ``fd`` is readable, or after ``timeout`` seconds (None: no limit)."""
    loop = asyncio.get_running_loop()
    news = loop.create_future()
    loop.add_reader(fd, lambda: news.done() or news.set_result(None))
    try:
        if timeout is None:
            await news
        else:
            await asyncio.wait([news], timeout=timeout)
    finally:
        loop.remove_reader(fd)
        news.cancel()
