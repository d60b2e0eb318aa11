// Checks the camera simulator with a third-party ONVIF client, the npm
// `onvif` package (pinned by package-lock.json): WS-Discovery probe, then
// Cam.connect (GetSystemDateAndTime, GetServices, GetProfiles,
// GetVideoSources), GetDeviceInformation, GetNetworkInterfaces and
// GetStreamUri, with the simulator's credentials (PasswordDigest).
//
//   node validate-with-npm-onvif.mjs --expect N [--unicast 127.0.0.1:PORT]
//        [--user U --password P]
//
// `onvif` always sends its Probe to 239.255.255.250:3702. With --unicast,
// that one destination is rewritten to the given address (so the check runs
// in the host namespace); without it the Probe is real multicast, for use
// inside a private network namespace only. Prints "ONVIF CLIENT CHECK OK".
import dgram from 'node:dgram';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const onvif = require('onvif');

const { values } = parseArgs({
  options: {
    expect: { type: 'string' },
    unicast: { type: 'string' },
    user: { type: 'string' },
    password: { type: 'string' },
  },
});
const expected = Number(values.expect ?? 1);

if (values.unicast) {
  const [host, port] = values.unicast.split(':');
  const send = dgram.Socket.prototype.send;
  dgram.Socket.prototype.send = function (msg, offset, length, destPort, destAddress, callback) {
    if (destPort === 3702 && destAddress === '239.255.255.250') {
      destPort = Number(port);
      destAddress = host;
    }
    return send.call(this, msg, offset, length, destPort, destAddress, callback);
  };
}

function fail(message) {
  console.error(`ONVIF CLIENT CHECK FAILED: ${message}`);
  process.exit(1);
}

const call = (cam, method, ...args) =>
  new Promise((resolve, reject) =>
    cam[method](...args, (err, result) => (err ? reject(err) : resolve(result))));

const found = await new Promise((resolve, reject) =>
  onvif.Discovery.probe({ timeout: 2000, resolve: false }, (err, matches) =>
    err ? reject(err) : resolve(matches)));
console.log(`probe: ${found.length} camera(s)`);
if (found.length !== expected) fail(`expected ${expected} camera(s), found ${found.length}`);

for (const match of found) {
  const body = match.probeMatches.probeMatch;
  const xaddr = new URL(body.XAddrs.split(' ')[0]);
  const cam = new onvif.Cam({
    hostname: xaddr.hostname, port: Number(xaddr.port), path: xaddr.pathname,
    username: values.user, password: values.password, autoconnect: false,
  });
  await call(cam, 'connect');
  const info = await call(cam, 'getDeviceInformation');
  const interfaces = await call(cam, 'getNetworkInterfaces');
  const token = cam.profiles[0].$.token;
  const stream = await call(cam, 'getStreamUri', { protocol: 'RTSP', profileToken: token });
  const nic = interfaces[0];
  console.log(`camera ${body.endpointReference.address}: ${info.manufacturer} ${info.model}` +
              ` serial ${info.serialNumber}, ${nic.info.hwAddress}` +
              ` ${nic.IPv4.config.manual.address}, ${cam.profiles.length} profile(s),` +
              ` stream ${stream.uri}`);
  if (!info.manufacturer || !stream.uri.startsWith('rtsp://')) fail('incomplete answers');
}
console.log('ONVIF CLIENT CHECK OK');
