// The contract every InstanceStore implementation must pass. Include this
// header in one test file per implementation and instantiate it:
//
//   INSTANTIATE_TEST_SUITE_P(MyStore, InstanceStoreContract,
//                            ::testing::Values(StoreImplementation{"MyStore", make}),
//                            implementation_name);
//
// where make() creates a fresh, empty underlying store and returns an opener;
// every call of the opener gives another independent handle on that same
// store, as a second node (or process) would hold.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "instance_store.hpp"
#include "test_support.hpp"

namespace dowser::store::testing {

using StoreOpener = std::function<std::unique_ptr<InstanceStore>()>;

struct StoreImplementation {
  std::string name;
  std::function<StoreOpener()> make_store;
};

inline void PrintTo(const StoreImplementation& implementation, std::ostream* out) {
  *out << implementation.name;
}

inline std::string implementation_name(const ::testing::TestParamInfo<StoreImplementation>& info) {
  return info.param.name;
}

class InstanceStoreContract : public ::testing::TestWithParam<StoreImplementation> {
 protected:
  void SetUp() override {
    open_ = GetParam().make_store();
    store_ = open_();
  }
  InstanceStore& store() { return *store_; }
  // Another handle on the same store, as another node would hold.
  std::unique_ptr<InstanceStore> open_another() { return open_(); }

  static void expect_error(StoreError::Kind kind, const std::function<void()>& action) {
    try {
      action();
      ADD_FAILURE() << "expected a StoreError";
    } catch (const StoreError& error) {
      EXPECT_EQ(error.kind(), kind) << error.what();
    }
  }

 private:
  StoreOpener open_;  // first: outlives every handle
  std::unique_ptr<InstanceStore> store_;
};

TEST_P(InstanceStoreContract, CreateGetAndListRoundTripEveryField) {
  const Instance instance = sample_instance("akri-onvif-4294ea", "edge");
  const uint64_t revision = store().create(instance);

  const std::optional<StoredInstance> got = store().get("edge", "akri-onvif-4294ea");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->instance, instance);
  EXPECT_EQ(got->revision, revision);

  const std::vector<StoredInstance> listed = open_another()->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].instance, instance);
  EXPECT_EQ(listed[0].revision, revision);
}

TEST_P(InstanceStoreContract, SameNameInTwoNamespacesIsTwoInstances) {
  store().create(sample_instance("cam-000001", "default"));
  store().create(sample_instance("cam-000001", "other"));
  EXPECT_EQ(store().list().size(), 2u);
  EXPECT_EQ(store().get("other", "cam-000001")->instance.namespace_name, "other");
}

TEST_P(InstanceStoreContract, CreateOfAnExistingNameFailsWithAlreadyExists) {
  const Instance first = sample_instance("cam-000001");
  const uint64_t revision = store().create(first);
  Instance second = first;
  second.capacity = 9;
  expect_error(StoreError::Kind::already_exists, [&] { open_another()->create(second); });
  EXPECT_EQ(store().get("default", "cam-000001")->instance, first);
  EXPECT_EQ(store().get("default", "cam-000001")->revision, revision);
}

TEST_P(InstanceStoreContract, UpdateAtTheCurrentRevisionWritesAndReturnsALargerRevision) {
  Instance instance = sample_instance("cam-000001");
  const uint64_t created = store().create(instance);
  instance.device_usage["cam-000001-2"] = "node-b";
  instance.nodes.insert("node-c");
  const uint64_t updated = store().update(instance, created);
  EXPECT_GT(updated, created);
  const std::optional<StoredInstance> got = open_another()->get("default", "cam-000001");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->instance, instance);
  EXPECT_EQ(got->revision, updated);
}

TEST_P(InstanceStoreContract, UpdateAtAStaleRevisionConflicts) {
  Instance instance = sample_instance("cam-000001");
  const uint64_t created = store().create(instance);
  instance.capacity = 5;
  const uint64_t updated = open_another()->update(instance, created);
  Instance stale = instance;
  stale.capacity = 7;
  expect_error(StoreError::Kind::conflict, [&] { store().update(stale, created); });
  EXPECT_EQ(store().get("default", "cam-000001")->instance.capacity, 5u);
  EXPECT_EQ(store().get("default", "cam-000001")->revision, updated);
}

TEST_P(InstanceStoreContract, RemoveAtAStaleRevisionConflictsAndAtTheCurrentOneRemoves) {
  Instance instance = sample_instance("cam-000001");
  const uint64_t created = store().create(instance);
  instance.capacity = 5;
  const uint64_t updated = store().update(instance, created);
  expect_error(StoreError::Kind::conflict,
               [&] { store().remove("default", "cam-000001", created); });
  ASSERT_TRUE(store().get("default", "cam-000001").has_value());

  open_another()->remove("default", "cam-000001", updated);
  EXPECT_FALSE(store().get("default", "cam-000001").has_value());
  EXPECT_TRUE(store().list().empty());
}

TEST_P(InstanceStoreContract, AMissingInstanceIsNotFound) {
  EXPECT_FALSE(store().get("default", "cam-000001").has_value());
  expect_error(StoreError::Kind::not_found,
               [&] { store().update(sample_instance("cam-000001"), 1); });
  expect_error(StoreError::Kind::not_found, [&] { store().remove("default", "cam-000001", 1); });
}

TEST_P(InstanceStoreContract, RevisionsGrowAcrossNamesAndAreNotReusedAfterDeletion) {
  Instance first = sample_instance("cam-000001");
  const uint64_t first_created = store().create(first);
  const uint64_t second_created = open_another()->create(sample_instance("cam-000002"));
  EXPECT_GT(second_created, first_created);
  first.capacity = 4;
  const uint64_t first_updated = store().update(first, first_created);
  EXPECT_GT(first_updated, second_created);
  store().remove("default", "cam-000001", first_updated);
  const uint64_t recreated = store().create(sample_instance("cam-000001"));
  EXPECT_GT(recreated, first_updated);
}

TEST_P(InstanceStoreContract, UpdateWithRetryLeavesAMissingOrUndecidedInstanceAlone) {
  const auto never_called = [](const Instance&) -> std::optional<Instance> {
    ADD_FAILURE() << "decide called for a missing Instance";
    return std::nullopt;
  };
  EXPECT_FALSE(update_with_retry(store(), "default", "cam-000001", never_called).has_value());

  const uint64_t created = store().create(sample_instance("cam-000001"));
  const auto keep = [](const Instance&) -> std::optional<Instance> { return std::nullopt; };
  const std::optional<StoredInstance> kept =
      update_with_retry(store(), "default", "cam-000001", keep);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->revision, created);
  EXPECT_EQ(store().get("default", "cam-000001")->revision, created);
}

TEST_P(InstanceStoreContract, UpdateWithRetryTrustsACachedCopyOnlyThroughTheCompareAndSwap) {
  Instance counter = sample_instance("counter-000001");
  counter.broker_properties[kCountProperty] = "0";
  const StoredInstance cached{counter, store().create(counter)};
  uint64_t written = 0;
  const auto first = update_with_retry(store(), "default", "counter-000001",
                                       increment_count(written), kUpdateAttempts, &cached);
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(first->revision, cached.revision);
  // The copy is stale now: its write must lose, and the retry count from the store.
  const auto second = update_with_retry(store(), "default", "counter-000001",
                                        increment_count(written), kUpdateAttempts, &cached);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(count_of(store().get("default", "counter-000001")->instance), 2u)
      << "a stale cached copy overwrote a newer write";
  // A copy that sees nothing to do is not believed: the store decides.
  Instance ahead = counter;
  ahead.broker_properties[kCountProperty] = "5";
  const StoredInstance claims_done{ahead, second->revision};
  const auto set_five = [](const Instance& current) -> std::optional<Instance> {
    if (count_of(current) == 5) return std::nullopt;
    Instance next = current;
    next.broker_properties[kCountProperty] = "5";
    return next;
  };
  const auto third = update_with_retry(store(), "default", "counter-000001", set_five,
                                       kUpdateAttempts, &claims_done);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(count_of(store().get("default", "counter-000001")->instance), 5u);
}

TEST_P(InstanceStoreContract, UpdateWithRetryLosesNoUpdateUnderContention) {
  constexpr int kHandles = 2;
  constexpr int kThreadsPerHandle = 8;
  constexpr int kIncrementsPerThread = 200;
  constexpr int kTotal = kHandles * kThreadsPerHandle * kIncrementsPerThread;
  Instance counter = sample_instance("counter-000001");
  counter.broker_properties[kCountProperty] = "0";
  store().create(counter);

  std::vector<std::unique_ptr<InstanceStore>> handles;
  for (int i = 0; i < kHandles; ++i) handles.push_back(open_another());
  std::mutex results_mutex;
  std::vector<uint64_t> written_counts;
  std::vector<std::string> failures;
  std::vector<std::thread> writers;
  for (const auto& handle : handles) {
    for (int t = 0; t < kThreadsPerHandle; ++t) {
      writers.emplace_back([&, store = handle.get()] {
        std::vector<uint64_t> mine;
        uint64_t last_revision = 0;
        try {
          for (int i = 0; i < kIncrementsPerThread; ++i) {
            uint64_t written = 0;
            const std::optional<StoredInstance> stored = update_with_retry(
                *store, "default", "counter-000001", increment_count(written), kContendedAttempts);
            if (!stored || stored->revision <= last_revision)
              throw std::runtime_error("revision did not grow");
            last_revision = stored->revision;
            mine.push_back(written);
          }
        } catch (const std::exception& error) {
          const std::lock_guard lock(results_mutex);
          failures.emplace_back(error.what());
        }
        const std::lock_guard lock(results_mutex);
        written_counts.insert(written_counts.end(), mine.begin(), mine.end());
      });
    }
  }
  for (std::thread& writer : writers) writer.join();

  for (const std::string& failure : failures) ADD_FAILURE() << failure;
  EXPECT_EQ(count_of(store().get("default", "counter-000001")->instance), uint64_t{kTotal});
  // Every winning write moved the count by one from a distinct value.
  std::vector<uint64_t> expected(kTotal);
  std::iota(expected.begin(), expected.end(), 1);
  std::sort(written_counts.begin(), written_counts.end());
  EXPECT_EQ(written_counts, expected);
}

TEST_P(InstanceStoreContract, WatchDeliversChangesMadeThroughAnotherHandle) {
  EventRecorder recorder;
  const auto subscription = store().watch(recorder.callback());
  const auto writer = open_another();

  Instance instance = sample_instance("cam-000001");
  const uint64_t created = writer->create(instance);
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", created));
  instance.nodes.insert("node-c");
  const uint64_t updated = writer->update(instance, created);
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", updated));
  writer->remove("default", "cam-000001", updated);
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::deleted, "cam-000001", updated));

  const std::vector<WatchEvent> events = recorder.events_for("cam-000001");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::upserted);
  EXPECT_EQ(events[0].object.revision, created);
  EXPECT_EQ(events[1].object.instance, instance);
  EXPECT_EQ(events[2].type, WatchEvent::Type::deleted);
  EXPECT_EQ(events[2].object.instance, instance);  // the last state seen
}

TEST_P(InstanceStoreContract, WatchDeliversChangesMadeThroughTheSameHandle) {
  EventRecorder recorder;
  const auto subscription = store().watch(recorder.callback());
  const uint64_t created = store().create(sample_instance("cam-000001"));
  EXPECT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", created));
}

TEST_P(InstanceStoreContract, WatchSeesNamespacesThatAppearLater) {
  EventRecorder recorder;
  const auto subscription = store().watch(recorder.callback());
  const uint64_t created = open_another()->create(sample_instance("cam-000001", "fresh-namespace"));
  ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", created));
  EXPECT_EQ(recorder.events_for("cam-000001")[0].object.instance.namespace_name, "fresh-namespace");
}

// Rapid changes may be coalesced: what must hold is revision order per
// Instance, the latest state in the end, and a delete (with the last state
// the watcher saw) for an Instance it has reported.
TEST_P(InstanceStoreContract, WatchDeliversEachInstanceInRevisionOrder) {
  constexpr int kUpdates = 40;
  EventRecorder recorder;
  const auto subscription = store().watch(recorder.callback());
  const auto writer = open_another();
  const std::vector<std::string> names{"cam-000001", "cam-000002"};
  std::map<std::string, StoredInstance> latest;
  for (const std::string& name : names) {
    latest[name] = {sample_instance(name), writer->create(sample_instance(name))};
    ASSERT_TRUE(recorder.wait_for(WatchEvent::Type::upserted, name, latest[name].revision));
  }
  for (int i = 0; i < kUpdates; ++i) {
    for (const std::string& name : names) {
      StoredInstance& current = latest[name];
      current.instance.broker_properties[kCountProperty] = std::to_string(i);
      current.revision = writer->update(current.instance, current.revision);
    }
  }
  writer->remove("default", "cam-000002", latest["cam-000002"].revision);

  ASSERT_TRUE(
      recorder.wait_for(WatchEvent::Type::upserted, "cam-000001", latest["cam-000001"].revision));
  ASSERT_TRUE(recorder.wait_until([](const std::vector<WatchEvent>& events) {
    return std::any_of(events.begin(), events.end(), [](const WatchEvent& event) {
      return event.type == WatchEvent::Type::deleted;
    });
  }));
  for (const std::string& name : names) {
    const std::vector<WatchEvent> events = recorder.events_for(name);
    for (size_t i = 1; i < events.size(); ++i) {
      if (events[i].type == WatchEvent::Type::upserted) {
        EXPECT_GT(events[i].object.revision, events[i - 1].object.revision)
            << name << " event " << i;
      }
    }
  }
  const StoredInstance last_kept = recorder.events_for("cam-000001").back().object;
  EXPECT_EQ(last_kept.instance, latest["cam-000001"].instance);
  EXPECT_EQ(last_kept.revision, latest["cam-000001"].revision);
  const std::vector<WatchEvent> removed = recorder.events_for("cam-000002");
  ASSERT_GE(removed.size(), 2u);
  EXPECT_EQ(removed.back().type, WatchEvent::Type::deleted);
  EXPECT_EQ(removed[removed.size() - 2].type, WatchEvent::Type::upserted);
  EXPECT_EQ(removed.back().object.instance, removed[removed.size() - 2].object.instance);
  EXPECT_EQ(removed.back().object.revision, removed[removed.size() - 2].object.revision);
}

TEST_P(InstanceStoreContract, WatchThenListMissesNothing) {
  constexpr int kUpdates = 60;
  const auto writer = open_another();
  Instance instance = sample_instance("cam-000001");
  uint64_t revision = writer->create(instance);

  std::mutex seen_mutex;
  std::map<std::string, uint64_t> seen;  // name -> newest revision, from events and list
  const auto merge = [&](const StoredInstance& stored) {
    const std::lock_guard lock(seen_mutex);
    uint64_t& newest = seen[stored.instance.name];
    newest = std::max(newest, stored.revision);
  };
  std::thread writing([&] {
    for (int i = 0; i < kUpdates; ++i) {
      instance.broker_properties[kCountProperty] = std::to_string(i);
      revision = writer->update(instance, revision);
      if (i == kUpdates / 2) writer->create(sample_instance("cam-000002"));
    }
  });
  EventRecorder recorder;
  const auto subscription = store().watch([&](const WatchEvent& event) {
    merge(event.object);
    recorder.record(event);
  });
  for (const StoredInstance& stored : store().list()) merge(stored);
  writing.join();

  std::map<std::string, uint64_t> expected;
  for (const StoredInstance& stored : writer->list())
    expected[stored.instance.name] = stored.revision;
  const bool converged = recorder.wait_until([&](const std::vector<WatchEvent>&) {
    const std::lock_guard lock(seen_mutex);
    return seen == expected;
  });
  EXPECT_TRUE(converged);
}

TEST_P(InstanceStoreContract, DestroyingASubscriptionWaitsForItsCallbackAndEndsCalls) {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool release = false;
  bool returned = false;
  int calls = 0;
  auto subscription = store().watch([&](const WatchEvent&) {
    std::unique_lock lock(mutex);
    ++calls;
    if (calls > 1) return;
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
    returned = true;
  });
  EventRecorder sentinel;
  const auto sentinel_subscription = store().watch(sentinel.callback());
  const auto writer = open_another();
  writer->create(sample_instance("cam-000001"));
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, kEventDeadline, [&] { return entered; }));
  }

  bool destroyed = false;
  bool returned_when_destroyed = false;
  std::thread destroying([&] {
    subscription.reset();
    const std::lock_guard lock(mutex);
    destroyed = true;
    returned_when_destroyed = returned;
    changed.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    // A negative check: destruction must not finish while the callback runs.
    EXPECT_FALSE(changed.wait_for(lock, std::chrono::milliseconds(200), [&] { return destroyed; }));
    release = true;
    changed.notify_all();
    EXPECT_TRUE(changed.wait_for(lock, kEventDeadline, [&] { return destroyed; }));
    EXPECT_TRUE(returned_when_destroyed);
  }
  destroying.join();

  const uint64_t later = writer->create(sample_instance("cam-000002"));
  ASSERT_TRUE(sentinel.wait_for(WatchEvent::Type::upserted, "cam-000002", later));
  const std::lock_guard lock(mutex);
  EXPECT_EQ(calls, 1);
}

TEST_P(InstanceStoreContract, ACallbackMayDestroyItsOwnSubscription) {
  std::mutex mutex;
  std::unique_ptr<WatchSubscription> subscription;
  EventRecorder seen_before_destroying;
  {
    const std::lock_guard lock(mutex);
    subscription = store().watch([&](const WatchEvent& event) {
      seen_before_destroying.record(event);
      std::unique_ptr<WatchSubscription> own;
      {
        const std::lock_guard inner(mutex);
        own = std::move(subscription);
      }
      own.reset();  // destroyed from inside its own callback
    });
  }
  EventRecorder sentinel;
  const auto sentinel_subscription = store().watch(sentinel.callback());
  const auto writer = open_another();
  const uint64_t first = writer->create(sample_instance("cam-000001"));
  ASSERT_TRUE(seen_before_destroying.wait_for(WatchEvent::Type::upserted, "cam-000001", first));
  const uint64_t second = writer->create(sample_instance("cam-000002"));
  ASSERT_TRUE(sentinel.wait_for(WatchEvent::Type::upserted, "cam-000002", second));
  EXPECT_EQ(seen_before_destroying.events().size(), 1u);
  const std::lock_guard lock(mutex);
  EXPECT_EQ(subscription, nullptr);
}

}  // namespace dowser::store::testing
