/*
 * bd_ram.c — a device in memory, for unit tests.
 *
 * The bytes live in an anonymous private mapping, so a large device costs
 * only the pages that are written. Everything is "durable" at once: flush
 * is a no-op that succeeds. Async batches run on a bd_worker thread.
 *
 * Locking: ram->lock (a rwlock) is taken shared by reads and exclusive by
 * writes, so concurrent overlapping I/O never races on the bytes; a read
 * sees each concurrent write either entirely or not at all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "blockdev/bd_internal.h"

struct bd_ram {
	struct bd_dev dev;       /* first: container of the common header */
	struct bd_worker worker; /* its own locking */
	pthread_rwlock_t lock;   /* protects the contents of mem */
	unsigned char *mem;      /* immutable mapping of dev.size bytes */
};

static struct bd_ram *to_ram(struct bd_dev *dev)
{
	return (struct bd_ram *)dev;
}

static int ram_read(struct bd_dev *dev, void *buf, size_t len, uint64_t off)
{
	struct bd_ram *ram = to_ram(dev);

	pthread_rwlock_rdlock(&ram->lock);
	memcpy(buf, ram->mem + off, len);
	pthread_rwlock_unlock(&ram->lock);
	return 0;
}

static int ram_write(struct bd_dev *dev, const void *buf, size_t len,
		     uint64_t off, unsigned io_flags)
{
	struct bd_ram *ram = to_ram(dev);

	(void)io_flags; /* memory is always "durable" */
	pthread_rwlock_wrlock(&ram->lock);
	memcpy(ram->mem + off, buf, len);
	pthread_rwlock_unlock(&ram->lock);
	return 0;
}

static int ram_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (ios[i].op == BD_READ)
			ios[i].ret = ram_read(dev, ios[i].buf, ios[i].len,
					      ios[i].off);
		else
			ios[i].ret = ram_write(dev, ios[i].buf, ios[i].len,
					       ios[i].off, ios[i].flags);
	}
	return 0;
}

static int ram_submit_async(struct bd_dev *dev, struct bd_io *ios,
			    unsigned n, bd_done_fn done, void *arg)
{
	return bd_worker_submit(&to_ram(dev)->worker, ios, n, done, arg);
}

static int ram_flush(struct bd_dev *dev)
{
	(void)dev;
	return 0;
}

static void ram_close(struct bd_dev *dev)
{
	struct bd_ram *ram = to_ram(dev);

	bd_worker_fini(&ram->worker);
	pthread_rwlock_destroy(&ram->lock);
	munmap(ram->mem, dev->size);
	bd_dev_fini(dev);
	free(ram);
}

static const struct bd_ops ram_ops = {
	.read = ram_read,
	.write = ram_write,
	.submit = ram_submit,
	.submit_async = ram_submit_async,
	.flush = ram_flush,
	.close = ram_close,
};

int bd_ram_open(uint64_t size, struct bd_dev **out)
{
	struct bd_ram *ram;
	int ret;

	if (size == 0 || size % BD_ALIGN != 0 || size > SIZE_MAX)
		return -EINVAL;
	ram = calloc(1, sizeof(*ram));
	if (ram == NULL)
		return -ENOMEM;
	ram->mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ram->mem == MAP_FAILED) {
		ret = -ENOMEM;
		goto out_free;
	}
	ret = bd_dev_init(&ram->dev, &ram_ops, "ram", size, 0);
	if (ret != 0)
		goto out_unmap;
	ret = -pthread_rwlock_init(&ram->lock, NULL);
	if (ret != 0)
		goto out_fini;
	ret = bd_worker_init(&ram->worker, &ram->dev, ram_submit);
	if (ret != 0)
		goto out_rwlock;
	*out = &ram->dev;
	return 0;

out_rwlock:
	pthread_rwlock_destroy(&ram->lock);
out_fini:
	bd_dev_fini(&ram->dev);
out_unmap:
	munmap(ram->mem, size);
out_free:
	free(ram);
	return ret;
}
