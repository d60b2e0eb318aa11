/* handler.h must stay plain C99 (compiled here with -std=c99 -pedantic-errors). */
#include <dowser/handler.h>

int main(void) {
  dowser_device device = {sizeof(dowser_device),         {"id", 2}, NULL, 0, NULL, 0, NULL, 0,
                          DOWSER_SHARING_HANDLER_DEFAULT};
  return device.struct_size == sizeof device ? 0 : 1;
}
