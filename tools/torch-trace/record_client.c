/* record_client.c — a stand-in for PyTorch in tests/test_record.c: makes tensor-like
 * allocations (posix_memalign with 64-byte alignment) and other allocations the recorder must
 * leave out, in an order that exercises its pointer table. Usage: record_client N SEED. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    void *live[64] = {0};
    size_t tensors = 0;
    for (int i = 0; i < n; i++) {
        int k = (int)(rand_r(&seed) % 64);
        if (live[k]) {
            free(live[k]);
            live[k] = NULL;
            continue;
        }
        size_t size = 1 + rand_r(&seed) % 100000;
        if (posix_memalign(&live[k], 64, size) != 0) return 1;
        tensors++;
        void *other = NULL; /* not a tensor: another alignment, or malloc */
        if (posix_memalign(&other, 128, size) != 0) return 1;
        free(other);
        free(malloc(size));
    }
    for (int k = 0; k < 64; k++)
        if (k % 2) free(live[k]); /* half stay live at exit: they have no free row */
    size_t still = 0;
    for (int k = 0; k < 64; k += 2)
        still += live[k] != NULL;
    printf("%zu %zu\n", tensors, still); /* tensor allocations, and those left live */
    return 0;
}
