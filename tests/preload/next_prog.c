/* next_prog.c — prints next_value() (42 when RTLD_NEXT resolves relative to its caller). */
#include <stdio.h>

int next_value(void);

int main(void)
{
    int v = next_value();
    printf("next_value=%d\n", v);
    return v == 42 ? 0 : 1;
}
