"""`nettop capture`: the kernel files nettop reads, written as one small archive that
`--root` opens on another machine (docs/captures.md)."""
