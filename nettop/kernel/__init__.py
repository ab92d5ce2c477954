"""The kernel interfaces nettop talks through: the sysfs/procfs root, netlink sockets
(rtnetlink, ethtool, netdev generic netlink) and the ethtool ioctl. No nettop imports."""
