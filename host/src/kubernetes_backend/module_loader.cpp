// Loading the module, on dowserd's side: no Kubernetes code and no libcurl here.
#include "kubernetes_backend.hpp"

#include <dlfcn.h>

#include <system_error>

namespace dowser::kubernetes_backend {
namespace {

// dlerror()'s text, without the module's path when it starts with it: the
// messages below name the module themselves.
std::string last_dl_error(const std::filesystem::path& module) {
  const char* error = ::dlerror();
  std::string text = error != nullptr ? error : "unknown error";
  const std::string prefix = module.string() + ": ";
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

}  // namespace

std::filesystem::path default_module_path() {
  std::error_code error;
  const auto program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    throw BackendError("cannot find dowserd's own path (/proc/self/exe): " + error.message());
  return (program.parent_path() / ".." / "lib" / "dowser" / "libdowser-kubernetes.so")
      .lexically_normal();
}

std::unique_ptr<KubernetesBackend> load(const std::filesystem::path& module,
                                        const BackendOptions& options) {
  // Never closed: the backend's objects and threads may live until exit.
  void* library = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw BackendError("cannot load the Kubernetes module " + module.string() + ": " +
                       last_dl_error(module));
  }
  void* symbol = ::dlsym(library, kCreateSymbol);
  if (symbol == nullptr) {
    throw BackendError(module.string() +
                       " is not dowser's Kubernetes module: " + last_dl_error(module));
  }
  auto* create = reinterpret_cast<CreateFunction*>(symbol);
  std::string error;
  std::unique_ptr<KubernetesBackend> backend(create(options, error));
  if (!backend) throw BackendError(error);
  return backend;
}

}  // namespace dowser::kubernetes_backend
