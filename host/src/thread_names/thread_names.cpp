#include "thread_names.hpp"

#include <pthread.h>

#include <string>

namespace dowser {

void name_this_thread(std::string_view name) {
  const std::string cut(name.substr(0, kThreadNameMax));
  ::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace dowser
