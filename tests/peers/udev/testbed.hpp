// A umockdev testbed owned by the test process: the device descriptions of
// tests/peers/udev, plus devices added, changed and removed with uevents.
// The process must run with libumockdev-preload (see run_under_umockdev.sh),
// so that libudev, here and in the handler, sees the testbed instead of /sys.
#pragma once

#include <umockdev.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace udev_handler::testing {

// The descriptions under tests/peers/udev, in load order (base first).
inline const std::vector<std::string> kLab = {"base", "cameras", "ttys", "sound", "pci"};

inline const std::string kSys = "/sys";
inline const std::string kXhci = "/devices/pci0000:00/0000:00:14.0";
inline const std::string kCamera1 = kXhci + "/usb1/1-1";
inline const std::string kCamera10 = kXhci + "/usb1/1-10";
inline const std::string kVideo0 = kCamera1 + "/1-1:1.0/video4linux/video0";
inline const std::string kVideo1 = kCamera1 + "/1-1:1.0/video4linux/video1";
inline const std::string kVideo2 = kCamera10 + "/1-10:1.0/video4linux/video2";
inline const std::string kSerialAdapter = kXhci + "/usb1/1-4";
inline const std::string kTtyUsb0 = kSerialAdapter + "/1-4:1.0/ttyUSB0/tty/ttyUSB0";
inline const std::string kTtyS0 = "/devices/pnp0/00:01/tty/ttyS0";
inline const std::string kCard0 = "/devices/pci0000:00/0000:00:1f.3/sound/card0";
inline const std::string kGpu = "/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

using Pairs = std::initializer_list<std::pair<std::string, std::string>>;

class Testbed {
 public:
  Testbed() : testbed_(umockdev_testbed_new()) {
    // False without the preload: libudev would then read the real /sys.
    if (!umockdev_in_mock_environment())
      throw std::runtime_error("not in a umockdev environment: run under umockdev-wrapper");
  }
  ~Testbed() { g_object_unref(testbed_); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  // Loads tests/peers/udev/<name>.umockdev.
  void load(const std::string& name) {
    std::string file = std::string(UDEV_PEERS_DIR) + "/" + name + ".umockdev";
    GError* error = nullptr;
    if (!umockdev_testbed_add_from_file(testbed_, file.c_str(), &error)) {
      std::string message = error != nullptr ? error->message : "unknown error";
      g_clear_error(&error);
      throw std::runtime_error("cannot load " + file + ": " + message);
    }
  }
  void load_lab() {
    for (const auto& name : kLab) load(name);
  }

  // Adds parent_devpath/name and sends its "add" uevent. Returns its devpath.
  std::string add(const std::string& subsystem, const std::string& name,
                  const std::string& parent_devpath, Pairs attributes, Pairs properties) {
    Strings attribute_list(attributes);
    Strings property_list(properties);
    gchar* syspath = umockdev_testbed_add_devicev(testbed_, subsystem.c_str(), name.c_str(),
                                                  (kSys + parent_devpath).c_str(),
                                                  attribute_list.data(), property_list.data());
    if (syspath == nullptr) throw std::runtime_error("umockdev cannot add " + name);
    std::string devpath = std::string(syspath).substr(kSys.size());
    g_free(syspath);
    return devpath;
  }

  void set_attribute(const std::string& devpath, const std::string& name,
                     const std::string& value) {
    umockdev_testbed_set_attribute(testbed_, (kSys + devpath).c_str(), name.c_str(), value.c_str());
  }
  void set_property(const std::string& devpath, const std::string& name, const std::string& value) {
    umockdev_testbed_set_property(testbed_, (kSys + devpath).c_str(), name.c_str(), value.c_str());
  }
  void uevent(const std::string& devpath, const std::string& action) {
    umockdev_testbed_uevent(testbed_, (kSys + devpath).c_str(), action.c_str());
  }
  // As the kernel does it: the "remove" uevent, then the device is gone.
  void remove(const std::string& devpath) {
    uevent(devpath, "remove");
    remove_silently(devpath);
  }
  // Deletes the device's files; umockdev sends no uevent for this.
  void remove_silently(const std::string& devpath) {
    umockdev_testbed_remove_device(testbed_, (kSys + devpath).c_str());
  }

 private:
  // NULL-terminated key, value, key, value... as umockdev wants them.
  class Strings {
   public:
    explicit Strings(Pairs pairs) {
      for (const auto& [key, value] : pairs) {
        storage_.push_back(key);
        storage_.push_back(value);
      }
      for (auto& s : storage_) pointers_.push_back(s.data());
      pointers_.push_back(nullptr);
    }
    Strings(const Strings&) = delete;
    Strings& operator=(const Strings&) = delete;
    gchar** data() { return pointers_.data(); }

   private:
    std::vector<std::string> storage_;
    std::vector<gchar*> pointers_;  // into storage_, which no longer changes
  };

  UMockdevTestbed* testbed_;
};

}  // namespace udev_handler::testing
