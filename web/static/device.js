// device.js: the page that approves a device sign-in (corral login
// SERVER). The viewer must be signed in to the dashboard (the session
// cookie); the code goes to POST /auth/device/approve through api.js, so
// it carries the dashboard's CSRF header.
import { whoami, send } from './api.js';

const who = document.getElementById('who');
const form = document.getElementById('device-form');
const input = document.getElementById('user-code');
const result = document.getElementById('result');

const code = new URLSearchParams(location.search).get('code');
if (code) input.value = code;

function text(el, s) {
  el.textContent = s;
}

whoami().then((me) => {
  text(who, `Signed in as ${me.user} (${me.role}).`);
  form.hidden = false;
  input.focus();
}).catch((e) => {
  who.textContent = '';
  const a = document.createElement('a');
  a.href = '/';
  a.textContent = 'Sign in to the dashboard';
  who.append(e.status === 401 ? 'You are not signed in. ' : `Cannot tell who you are: ${e.message}. `, a, ', then come back to this page.');
});

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  text(result, 'Approving…');
  try {
    const ok = await send('POST', '/auth/device/approve', { user_code: input.value.trim() });
    text(result, `Approved: the CLI is signed in as ${ok.user} (${ok.role}). You may close this page.`);
    form.hidden = true;
  } catch (e) {
    text(result, `Not approved: ${e.message}`);
  }
});
