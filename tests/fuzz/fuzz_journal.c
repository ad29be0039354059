/*
 * fuzz_journal.c — the journal a dead node left behind, damaged: replayed
 * by the next mount (and by fsck -y), then the same walk and checks as
 * fuzz_image.c (fz_image.h).
 *
 * The base image is a node that crashed right after committing a last
 * batch (a rename, an unlink, a mkdir, an xattr): slot 0's journal holds
 * committed transactions that were not written home. Input: byte 0 flags
 * (FZ_F_*), then the journal blocks of both slots that are not all zero
 * (headers, descriptors, images, commits) in block order. Unless FZ_F_RAW
 * each block's crc and each commit's tx_crc are recomputed, so a mutated
 * descriptor or image is replayed rather than rejected as torn.
 */
#include "tests/fuzz/fz_common.h"
#include "tests/fuzz/fz_image.h"

/* Every journal block that is not all zero. */
static void map(struct fz_img *im)
{
	fz_map_nonzero(im, im->jstart, im->jend);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fz_image_input(data, size, 1, map);
}
