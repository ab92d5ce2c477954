"""SIGHUP and SIGTERM while nettop changes the host: held until the change is whole.

sshd hanging up, a window closing or `kill` ends nettop through the handler that
`trial.install_exit_revert` sets, which reverts the changes still on trial through the
Tuner. Python runs that handler on the main thread, between two bytecodes of whatever the
main thread was doing; were that the Tuner's own work (the countdown reverting at its
deadline, an `n`, the live view's revert on exit), the handler would wait for the lock
its own thread holds, for ever, with the change perhaps half put back.

So the Tuner holds these signals while it holds its lock (`deferred`), and the kernel
delivers them when it lets go. In a process with other threads the kernel may hand the
signal to one of those instead, and Python then runs the handler on the main thread all
the same, inside the block: `inside()` tells the handler so, and it does its work on a
thread of its own, which waits for the main thread to leave its blocks (`settled`): until
then the change may not yet be anywhere the handler can find it (a trial journaled but
not yet on this process's list: seen in CI, the process then ended with the change in
place). Such threads are not only ours: numpy's OpenBLAS starts one per extra CPU.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

HANGUPS = frozenset({signal.SIGHUP, signal.SIGTERM})
# deferred blocks the main thread is inside: the only thread Python runs handlers on, so
# the only one whose depth `inside` is asked, and the one `settled` waits for
_main_open = 0
_main_left = threading.Condition()  # an RLock: a handler run inside the block re-enters it


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGHUP and SIGTERM for the block (this thread's mask, restored after, so
    blocks nest). One that arrives meanwhile is delivered as the block ends; one that
    arrived just before runs its handler before the block starts, as Python runs a
    pending handler on return from the mask call."""
    global _main_open
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HANGUPS)
    main = threading.current_thread() is threading.main_thread()
    if main:
        with _main_left:
            _main_open += 1
    try:
        yield
    finally:
        if main:
            with _main_left:
                _main_open -= 1
                if not _main_open:
                    _main_left.notify_all()
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def inside() -> bool:
    """Whether the main thread, where Python runs a hang-up handler, is in a `deferred`
    block (the handler interrupted it)."""
    return _main_open > 0


def settled() -> None:
    """Wait until the main thread is out of its `deferred` blocks: what a hang-up
    handler's own thread does before it looks for the changes to put back."""
    with _main_left:
        _main_left.wait_for(lambda: not _main_open)
