/*
 * fz_memfd.h — an input as a file, for the code that only reads paths
 * (the cluster file, trace files): a memfd seen as /proc/self/fd/N.
 */
#ifndef UCFS_FZ_MEMFD_H
#define UCFS_FZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* A memfd holding @data; its path into @path. The fd, or -1. */
static int fz_memfd(const char *name, const uint8_t *data, size_t size,
		    char *path, size_t pathlen)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (size > 0 && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	snprintf(path, pathlen, "/proc/self/fd/%d", fd);
	return fd;
}

#endif /* UCFS_FZ_MEMFD_H */
