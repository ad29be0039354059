/*
 * fuzz_image.c — a shared disk that another node, a bug or the disk
 * itself corrupted: mount, walk, modify, unmount, fsck (fz_image.h).
 *
 * Input: byte 0 flags (FZ_F_*), then the contents of the base image's
 * metadata blocks outside the journals, one block after another in block
 * order (a short input leaves the rest as built). FZ_WRITE_SEED gets the
 * whole unmodified mapping.
 */
#include "tests/fuzz/fz_common.h"
#include "tests/fuzz/fz_image.h"

/* The metadata blocks outside the journals, and each journal's header. */
static void map(struct fz_img *im)
{
	const struct fs_sb *sb = (const void *)im->base;

	fz_map_meta(im, 0, im->jstart);
	for (uint32_t s = 0; s < sb->slot_count; s++)
		fz_map_meta(im, im->jstart + (uint64_t)s * im->jblocks,
			    im->jstart + (uint64_t)s * im->jblocks + 1);
	fz_map_meta(im, im->jend, FZ_DEV_BLOCKS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fz_image_input(data, size, 0, map);
}
