// Debian's static gSOAP runtime (libgsoapssl++.a) is compiled as
// position-independent *executable* code: it reaches std::nothrow with a
// PC-relative relocation, which a shared object cannot resolve against
// libstdc++.so. This module-local definition satisfies it; the handler's
// version script keeps it (and all of gSOAP) local to the module. The object
// is an empty tag whose address nobody compares.
#include <new>

const std::nothrow_t std::nothrow{};  // NOLINT(cert-dcl58-cpp)
