"""Read-only ethtool over the SIOCETHTOOL ioctl: driver info, statistics, coalescing,
rings and channels.

Reading uses the ioctl because it is one syscall per question on a socket kept open,
works on every kernel nettop supports, and needs no string parsing of `ethtool`'s
output. Setting values goes through ethtool netlink (nettop/kernel/ethtool_nl.py), which carries
the kernel's own error text.
"""

from __future__ import annotations

import array
import errno
import fcntl
import socket
import struct

SIOCETHTOOL = 0x8946
ETHTOOL_GDRVINFO = 0x03
ETHTOOL_GCOALESCE = 0x0E
ETHTOOL_GRINGPARAM = 0x10
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETHTOOL_GCHANNELS = 0x3C
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32

# struct ethtool_coalesce after `cmd`, in order, with ethtool's CLI names.
COALESCE_FIELDS = (
    "rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq",
    "tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq",
    "stats-block-usecs", "adaptive-rx", "adaptive-tx",
    "pkt-rate-low", "rx-usecs-low", "rx-frames-low", "tx-usecs-low", "tx-frames-low",
    "pkt-rate-high", "rx-usecs-high", "rx-frames-high", "tx-usecs-high", "tx-frames-high",
    "sample-interval",
)
RING_FIELDS = ("rx-max", "rx-mini-max", "rx-jumbo-max", "tx-max", "rx", "rx-mini", "rx-jumbo", "tx")
CHANNEL_FIELDS = ("rx-max", "tx-max", "other-max", "combined-max", "rx", "tx", "other", "combined")


class EthtoolUnsupported(OSError):
    """The driver does not implement this ethtool operation (EOPNOTSUPP)."""


class Ethtool:
    """One AF_INET datagram socket for all ethtool ioctls."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Ethtool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ioctl(self, ifname: str, buf: array.array) -> None:
        addr, _ = buf.buffer_info()
        ifreq = struct.pack("16sP", ifname.encode()[:15], addr)
        try:
            fcntl.ioctl(self._sock.fileno(), SIOCETHTOOL, ifreq)
        except OSError as exc:
            if exc.errno == errno.EOPNOTSUPP:
                raise EthtoolUnsupported(exc.errno, f"{ifname}: not supported by the driver") from None
            raise

    def _u32s(self, ifname: str, cmd: int, count: int) -> tuple[int, ...]:
        buf = array.array("I", [cmd] + [0] * count)
        self._ioctl(ifname, buf)
        return tuple(buf[1:])

    def drvinfo(self, ifname: str) -> dict[str, object]:
        """driver, version, fw_version, bus_info, n_stats (struct ethtool_drvinfo)."""
        buf = array.array("B", bytes(196))
        struct.pack_into("I", buf, 0, ETHTOOL_GDRVINFO)
        self._ioctl(ifname, buf)
        raw = buf.tobytes()

        def s(off: int) -> str:
            return raw[off:off + 32].split(b"\0", 1)[0].decode("utf-8", "replace")

        n_priv, n_stats = struct.unpack_from("II", raw, 4 + 32 * 5 + 12)
        return {"driver": s(4), "version": s(36), "fw_version": s(68), "bus_info": s(100),
                "n_stats": n_stats, "n_priv_flags": n_priv}

    def stat_count(self, ifname: str) -> int:
        buf = array.array("I", [ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0, 0])
        self._ioctl(ifname, buf)
        return buf[4] if buf[2] & (1 << ETH_SS_STATS) else 0

    def stat_names(self, ifname: str, count: int | None = None) -> list[str]:
        n = self.stat_count(ifname) if count is None else count
        if n == 0:
            return []
        buf = array.array("B", bytes(12 + n * ETH_GSTRING_LEN))
        struct.pack_into("III", buf, 0, ETHTOOL_GSTRINGS, ETH_SS_STATS, n)
        self._ioctl(ifname, buf)
        raw = buf.tobytes()[12:]
        return [raw[i:i + ETH_GSTRING_LEN].split(b"\0", 1)[0].decode("utf-8", "replace")
                for i in range(0, n * ETH_GSTRING_LEN, ETH_GSTRING_LEN)]

    def stats(self, ifname: str, count: int) -> list[int]:
        buf = array.array("Q", [0] * (1 + count))
        struct.pack_into("II", buf, 0, ETHTOOL_GSTATS, count)
        self._ioctl(ifname, buf)
        got = struct.unpack_from("I", buf, 4)[0]
        return list(buf[1:1 + got])

    def coalesce(self, ifname: str) -> dict[str, int]:
        return dict(zip(COALESCE_FIELDS, self._u32s(ifname, ETHTOOL_GCOALESCE, len(COALESCE_FIELDS))))

    def rings(self, ifname: str) -> dict[str, int]:
        return dict(zip(RING_FIELDS, self._u32s(ifname, ETHTOOL_GRINGPARAM, len(RING_FIELDS))))

    def channels(self, ifname: str) -> dict[str, int]:
        return dict(zip(CHANNEL_FIELDS, self._u32s(ifname, ETHTOOL_GCHANNELS, len(CHANNEL_FIELDS))))
